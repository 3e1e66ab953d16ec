# In-context dense retrieval with retrieval_voc.py's settings (Open
# Hummingbird's) on ADE20K (data/ade/ADEChallengeData2016, mmseg's layout
# and labels: 150 classes, 0 = "other" ignored; Open Hummingbird keeps
# "other" as a 151st class of the memory), for
# tools/analysis_tools/dense_retrieval.py --probe THIS: memory = the 20,210
# training images, mmseg's IoUMetric (mIoU).
_base_ = ['../_base_/datasets/ade20k_512x512.py']

retrieval_probe = dict(size=512, k=30, temperature=0.02, augment_epochs=2,
                       memory_size=1024 * 10**4)
