# In-context dense retrieval (Hummingbird; Balazevic et al., NeurIPS 2023)
# on Pascal VOC 2012 with the settings of the Open Hummingbird reproduction
# (vpariza/open-hummingbird-eval), for tools/analysis_tools/dense_retrieval.py
# --probe THIS. Memory: the 10,582 "trainaug" images (VOC train + SBD;
# ImageSets/Segmentation/trainaug.txt lists their ids, as Open Hummingbird's
# file_sets/voc/full/trainaug.txt, masks in SegmentationClassAug), 2
# augmented passes (colour jitter 0.1 each with probability 0.5, random
# resized crop of scale 0.5-2), at most 1024 * 10**4 patches (the paper's
# and Open Hummingbird's largest memory), each the normalised last-block
# feature with its patch's class distribution; each of the 1,449 val
# images' patches votes with its k = 30 nearest memory patches weighted by
# softmax(cos / 0.02); distributions upsampled bilinearly, argmax, mmseg's
# IoUMetric (21 classes, 255 ignored). Images and labels resized to 512 x
# 512 (Open Hummingbird: 512 for patch 16 / 8 models, 504 for patch 14).
_base_ = ['mmseg::_base_/datasets/pascal_voc12.py']

train_dataloader = dict(
    dataset=dict(
        data_prefix=dict(
            img_path='JPEGImages', seg_map_path='SegmentationClassAug'),
        ann_file='ImageSets/Segmentation/trainaug.txt'))

retrieval_probe = dict(size=512, k=30, temperature=0.02, augment_epochs=2,
                       memory_size=1024 * 10**4)
