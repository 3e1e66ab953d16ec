# In-context dense retrieval (Hummingbird; Balazevic et al., NeurIPS 2023,
# settings of the Open Hummingbird reproduction) on ADE20K
# (data/ade/ADEChallengeData2016, mmseg's layout and labels: 150 classes,
# 0 = "other" ignored; Open Hummingbird keeps "other" as a 151st class of
# the memory), for tools/analysis_tools/dense_retrieval.py --probe THIS:
# memory = the 20,210 training images in 2 augmented passes (colour jitter
# 0.1 each with probability 0.5, random resized crop of scale 0.5-2), at
# most 1024 * 10**4 patches, each the normalised last-block feature with
# its patch's class distribution; each validation patch votes with its
# k = 30 nearest memory patches weighted by softmax(cos / 0.02);
# distributions upsampled bilinearly, argmax, mmseg's IoUMetric (mIoU).
# Images and labels resized to 512 x 512 (Open Hummingbird: 512 for patch
# 16 / 8 models, 504 for patch 14).
_base_ = ['../_base_/datasets/ade20k_512x512.py']

retrieval_probe = dict(size=512, k=30, temperature=0.02, augment_epochs=2,
                       memory_size=1024 * 10**4)
