"""Linear segmentation probe of frozen patch features (DINOv2 §7.3 "linear"
protocol): BatchNorm + a 1x1 convolution to the classes on the patch-token
map of the frozen backbone; the logits (one per patch) are upsampled
bilinearly to the label size by mmseg's loss and prediction code.

On NaFlex features (:class:`NaFlexEncoderDecoder`) each image is resized at
its aspect ratio within a token budget and has its own grid; the head runs
on every image's patches together (:meth:`BNLinearHead.forward_maps`) and
each image's logits are upsampled to its own label map, as mmseg upsamples
a batch of one grid to the batch's labels.

Imported by the probe configs (``custom_imports = dict(imports=['mmpos',
'mmpos.evaluation.seg_probe'])``), so that ``import mmpos`` does not import
mmseg. Registered in mmpos' (mmpretrain's) registry: mmseg configs say
``type='mmpretrain.BNLinearHead'``.
"""
from typing import List, Optional, Sequence

import torch
from mmcv.cnn import build_norm_layer
from mmengine.structures import PixelData
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.models.segmentors import EncoderDecoder
from mmseg.models.utils import resize
from mmseg.structures import SegDataSample
from mmseg.utils import add_prefix
from torch import Tensor

from mmpos.errors import BadInputError
from mmpos.registry import MODELS
from .naflex import check_naflex_backbone, naflex_inputs, naflex_maps


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

    def forward_maps(self, maps: Sequence[Sequence[Tensor]]) -> List[Tensor]:
        """NaFlex maps: per image, its outputs' maps ``(C, h_i, w_i)`` ->
        its logits ``(num_classes, h_i, w_i)``. The patches of all images
        go through BN and the 1x1 conv as one batch (in training, BN's
        statistics over all of them, as :meth:`forward` takes them over a
        batch of one grid); in eval mode each image's logits are those it
        gets alone."""
        feats = [self._transform_inputs([m[None] for m in image])
                 for image in maps]  # (1, C, h_i, w_i) each
        tokens = torch.cat([f.flatten(2) for f in feats], 2)[..., None]
        logits = self.cls_seg(self.bn(tokens))[0, :, :, 0]  # (K, sum h w)
        return [part.reshape(-1, *f.shape[2:]) for part, f in zip(
            logits.split([f.shape[2] * f.shape[3] for f in feats], 1), feats)]

    def loss_maps(self, logits: Sequence[Tensor],
                  data_samples: Sequence[SegDataSample]) -> dict:
        """:meth:`loss_by_feat` of :meth:`forward_maps`' logits: each
        image's ``(K, h_i, w_i)`` upsampled bilinearly to its own label
        map ``(H_i, W_i)``, then the pixels of all images as one batch
        (mmseg's mean over the batch's pixels, as on a batch upsampled to
        labels of one size)."""
        up = [resize(logit[None], size=sample.gt_sem_seg.shape,
                     mode='bilinear', align_corners=self.align_corners)
              for logit, sample in zip(logits, data_samples)]
        pixels = SegDataSample()
        pixels.gt_sem_seg = PixelData(data=torch.cat(
            [s.gt_sem_seg.data.flatten() for s in data_samples])[None, :,
                                                                None])
        return self.loss_by_feat(
            torch.cat([u.flatten(2) for u in up], 2)[..., None], [pixels])


@MODELS.register_module()
class NaFlexEncoderDecoder(EncoderDecoder):
    """mmseg's ``EncoderDecoder`` of a linear probe (a RoPE ViT and
    :class:`BNLinearHead`, no neck or auxiliary head) on NaFlex batches:
    each image, as the config's pipeline gives it, resized at its aspect
    ratio within ``max_tokens`` patches
    (:func:`~mmpos.evaluation.naflex.naflex_inputs`), the padded batch run
    through the backbone with ``out_type='raw'`` and split into one map
    per image (:func:`~mmpos.evaluation.naflex.naflex_maps`).

    * training: :meth:`BNLinearHead.loss_maps`, each image's logits
      upsampled to its label map (the pipeline's);
    * prediction: each image whole (``test_cfg`` mode ``'whole'``), its
      logits upsampled to the pipeline's image size and then, by mmseg's
      ``postprocess_result``, to the original one, where the metric scores
      them; as the square model does with a batch of one grid.

    Args:
        max_tokens: the token budget per image.
        backbone: a RoPE ViT config; its ``out_type`` becomes ``'raw'``.
        data_preprocessor: the square config's ``SegDataPreProcessor``
            (its ``mean``, ``std`` and ``bgr_to_rgb`` normalise the NaFlex
            patches; no padding or stacking: images keep their sizes).
        **kwargs: ``EncoderDecoder``'s.

    A linear probe config runs on NaFlex with ``--cfg-options
    model.type=mmpretrain.NaFlexEncoderDecoder model.max_tokens=T``.
    """

    def __init__(self, max_tokens: int, backbone: dict,
                 data_preprocessor: Optional[dict] = None, **kwargs):
        if kwargs.get('neck') or kwargs.get('auxiliary_head'):
            raise BadInputError('NaFlexEncoderDecoder: a neck or auxiliary '
                                'head does not run on NaFlex maps (a linear '
                                'probe has neither)')
        mode = (kwargs.get('test_cfg') or {}).get('mode', 'whole')
        if mode != 'whole':
            raise BadInputError(f"NaFlexEncoderDecoder: test_cfg mode {mode!r}"
                                " (NaFlex predicts each image whole: "
                                "model.test_cfg.mode=whole)")
        if max_tokens < 1:
            raise BadInputError(f'NaFlexEncoderDecoder: max_tokens must be '
                                f'>= 1, got {max_tokens}')
        pre = dict(data_preprocessor or {})
        super().__init__(backbone=dict(backbone, out_type='raw'),
                         data_preprocessor=dict(type='BaseDataPreprocessor'),
                         **kwargs)
        check_naflex_backbone(self.backbone)
        self.max_tokens = max_tokens
        self.mean = pre.get('mean', (0., 0., 0.))
        self.std = pre.get('std', (1., 1., 1.))
        self.bgr_to_rgb = pre.get('bgr_to_rgb', False)

    def naflex_logits(self, inputs: Sequence[Tensor]) -> List[Tensor]:
        """Images ``(3, H_i, W_i)`` as packed (uint8, the pipeline's
        channel order) -> logits ``(num_classes, h_i, w_i)`` on each
        image's NaFlex grid."""
        images = [img.permute(1, 2, 0).cpu().numpy() for img in inputs]
        if self.bgr_to_rgb:
            images = [img[..., ::-1] for img in images]
        batch = naflex_inputs(images, self.backbone.patch_size[0],
                              self.max_tokens, self.mean, self.std)
        device = next(self.parameters()).device
        maps, _ = naflex_maps(self.backbone,
                              {k: v.to(device) for k, v in batch.items()})
        return self.decode_head.forward_maps(list(zip(*maps)))

    def loss(self, inputs: Sequence[Tensor],
             data_samples: Sequence[SegDataSample]) -> dict:
        """``decode.loss_ce`` and ``decode.acc_seg`` of the batch
        (:meth:`BNLinearHead.loss_maps`)."""
        return add_prefix(self.decode_head.loss_maps(
            self.naflex_logits(inputs), data_samples), 'decode')

    def predict(self, inputs: Sequence[Tensor],
                data_samples: Sequence[SegDataSample]
                ) -> List[SegDataSample]:
        """Each data sample with ``seg_logits`` and ``pred_sem_seg`` at its
        original size."""
        return [self.postprocess_result(self.decode_head.predict_by_feat(
            logit[None], [sample.metainfo]), [sample])[0]
                for logit, sample in zip(self.naflex_logits(inputs),
                                         data_samples)]

    def _forward(self, inputs: Sequence[Tensor],
                 data_samples: Optional[Sequence[SegDataSample]] = None
                 ) -> List[Tensor]:
        """:meth:`naflex_logits`."""
        return self.naflex_logits(inputs)
