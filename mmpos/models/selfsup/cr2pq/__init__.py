"""CR2PQ (algorithm, :mod:`.cr2pq`) and its relative coordinates of one
view in another (Eq. 4, :mod:`.relative_coords`)."""
from .cr2pq import CR2PQ, featmap_to_tokens, patchify
from .relative_coords import ALIGNS, relative_coords

__all__ = ['CR2PQ', 'ALIGNS', 'featmap_to_tokens', 'patchify',
           'relative_coords']
