"""Linear segmentation probe of frozen patch features (DINOv2 §7.3 "linear"
protocol): BatchNorm + a 1x1 convolution to the classes on the patch-token
map of the frozen backbone; the logits (one per patch) are upsampled
bilinearly to the label size by mmseg's loss and prediction code.

Imported by the probe configs (``custom_imports = dict(imports=['mmpos',
'mmpos.evaluation.seg_probe'])``), so that ``import mmpos`` does not import
mmseg. Registered in mmpos' (mmpretrain's) registry: mmseg configs say
``type='mmpretrain.BNLinearHead'``.
"""
from mmcv.cnn import build_norm_layer
from mmseg.models.decode_heads.decode_head import BaseDecodeHead

from mmpos.registry import MODELS


@MODELS.register_module()
class BNLinearHead(BaseDecodeHead):
    """``BN -> Conv1x1(channels, num_classes)`` on ``(B, C, h, w)`` patch
    features (several blocks: ``input_transform='resize_concat'``, then
    ``channels`` is the concatenated width).

    Args:
        norm_cfg: the normalisation before the classifier (default BN;
            SyncBN for distributed runs, mmengine turns it into BN in a
            single process).
        **kwargs: :class:`BaseDecodeHead` arguments; ``channels`` must equal
            the (concatenated) input width, there is no projection.
    """

    def __init__(self, norm_cfg=dict(type='BN'), **kwargs):
        super().__init__(norm_cfg=norm_cfg, **kwargs)
        if self.in_channels != self.channels:
            raise ValueError(f'BNLinearHead: channels ({self.channels}) must '
                             f'equal the input width ({self.in_channels}); '
                             'it has no projection')
        self.bn = build_norm_layer(norm_cfg, self.channels)[1]

    def forward(self, inputs):
        """Backbone outputs -> logits ``(B, num_classes, h, w)``."""
        return self.cls_seg(self.bn(self._transform_inputs(inputs)))
