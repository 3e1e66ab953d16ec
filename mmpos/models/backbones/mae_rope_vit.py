"""RoPE ViT encoder for MAE pretraining (He et al., "Masked Autoencoders Are
Scalable Vision Learners", CVPR 2022, §3 "MAE encoder").

mmpretrain's ``MAEViT`` masks the patches of its APE ViT; this is the same
masking on mmpos' :class:`RoPEVisionTransformer`, with the same ``forward``
contract, so mmpretrain's ``MAE`` algorithm, ``MAEPretrainDecoder`` and
``MAEPretrainHead`` run on it unchanged:

* ``forward(x)`` (``mask=True``): per image, keep ``K = floor((1 - r) L)`` of
  the ``L = h * w`` patches, drawn uniformly (MAE's shuffle: ``argsort`` of
  uniform noise from torch's global generator, drawn as ``MAEViT`` draws
  it), and run the blocks on ``[cls; kept patches]`` only. Every kept patch
  is rotated at its **own grid coordinates** (and gets its own APE entry when
  ``use_ape``), never at its index in the shortened sequence. Returns
  ``(x, mask, ids_restore)``: ``x`` ``(B, 1 + K, C)`` (class token, then the
  kept patches in shuffled order; register tokens, if any, left out),
  ``mask`` ``(B, L)`` float, 1 = removed, ``ids_restore`` ``(B, L)`` long
  (``gather(cat(kept, removed), ids_restore)`` is the row-major grid).
* ``forward(x, mask=None)`` (or ``False``): the whole image, exactly
  :class:`RoPEVisionTransformer`'s forward (``MAE.extract_feat``, the online
  probe and downstream use).

No parameters are added: the state dict is :class:`RoPEVisionTransformer`'s,
so ``backbone.*`` of an MAE checkpoint is a transfer backbone as it stands.

The random init is ``MAEViT``'s (MAE's ``initialize_weights``): linear
layers Xavier-uniform with zero bias, LayerNorms ``(1, 0)``, the patch
projection Xavier-uniform as a flat ``(C, in_channels * p * p)`` matrix and
the class token normal with std 0.02. With ``rope=None, use_ape=True,
ape_type='sincos'`` it is the APE ViT of MAE and DropPos.
"""
from typing import Optional, Tuple, Union

import torch
from torch import Tensor, nn

from mmpos.registry import MODELS
from ..layers.masking import gather_tokens, random_masking
from .rope_vit import RoPEVisionTransformer


@MODELS.register_module()
class MAERoPEViT(RoPEVisionTransformer):
    """:class:`RoPEVisionTransformer` that masks patches as MAE (module
    docstring).

    Args:
        mask_ratio: removed fraction of the patches, in ``[0, 1)``.
        out_type: must be ``'raw'`` (the decoder reads the class token and
            the kept patches); the default here.
        *args, **kwargs: :class:`RoPEVisionTransformer`'s (``init_cfg``
            defaults to MAE's, see the module docstring). The masked path
            (:meth:`~RoPEVisionTransformer.forward_kept`) needs the class
            token and the last block as the only output.
    """

    # MAE's: Xavier-uniform linear layers, unit LayerNorms
    default_init_cfg = [
        dict(type='Xavier', layer='Linear', distribution='uniform', bias=0.),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.)
    ]

    def __init__(self, *args, mask_ratio: float = 0.75,
                 out_type: str = 'raw', **kwargs):
        kwargs.setdefault('init_cfg', self.default_init_cfg)
        super().__init__(*args, out_type=out_type, **kwargs)
        if not 0. <= mask_ratio < 1.:
            raise ValueError(f'MAERoPEViT: mask_ratio must lie in [0, 1), '
                             f'got {mask_ratio}')
        self.check_kept_forward('MAERoPEViT')
        self.mask_ratio = mask_ratio

    def init_tokens(self):
        """MAE's: the patch projection Xavier-uniform as a flat matrix, the
        class token normal (std 0.02); registers and a learnable APE as
        :class:`RoPEVisionTransformer`."""
        super().init_tokens()
        weight = self.patch_embed.projection.weight
        with torch.no_grad():
            nn.init.xavier_uniform_(weight.view(weight.shape[0], -1))
        nn.init.normal_(self.cls_token, std=.02)

    def forward(self, x: Tensor, mask: Optional[bool] = True
                ) -> Union[tuple, Tuple[Tensor, Tensor, Tensor]]:
        """``x``: images ``(B, in_channels, H, W)``. With ``mask`` (default)
        ``(x, mask, ids_restore)`` of the kept patches, else the unmasked
        backbone's tuple (module docstring)."""
        if not mask:
            return super().forward(x)
        tokens, hw = self.embed(x)
        batch_size, length, _ = tokens.shape
        masking = random_masking(batch_size, length, self.mask_ratio,
                                 x.device)
        out = self.forward_kept(gather_tokens(tokens, masking.ids_keep),
                                masking.ids_keep, hw)
        return out, masking.mask.to(torch.float32), masking.ids_restore
