"""CR2PQ: the algorithm (:mod:`.cr2pq`), its relative coordinates of one
view in another (Eq. 4, :mod:`.relative_coords`), its projector neck with
position-aware cross-attention (:mod:`.cr2pq_neck`) and its loss
(:mod:`.cr2pq_loss`)."""
from .cr2pq import CR2PQ, featmap_to_tokens, patchify
from .cr2pq_loss import CR2PQLoss
from .cr2pq_neck import CR2PQNeck, RoPECrossAttention
from .relative_coords import ALIGNS, relative_coords

__all__ = ['CR2PQ', 'ALIGNS', 'CR2PQLoss', 'CR2PQNeck', 'RoPECrossAttention',
           'featmap_to_tokens', 'patchify', 'relative_coords']
