# QB-Heat with Mobile-Former-1.0G (Tab. 8), the Tab. 9 recipe.
_base_ = ['./qbheat_mobileformer-285m_8xb128-coslr-800e_in1k.py']

model = dict(
    backbone=dict(arch='1.0g'),
    neck=dict(in_channels=1440))
