# QB-Heat with Mobile-Former-3.7G (Tab. 8), the Tab. 9 recipe (the Tab. 2
# ablation model).
_base_ = ['./qbheat_mobileformer-285m_8xb128-coslr-800e_in1k.py']

model = dict(
    backbone=dict(arch='3.7g'),
    neck=dict(in_channels=2880))
