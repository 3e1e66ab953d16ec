# CR2PQ on the mini images with view-consistent RoPE (not in the paper):
# the student rotates view A, the EMA teacher view B at their crop-box
# source coordinates, and the neck's queries sit at B's source positions
# among A's keys, all in A's patch units (see mmpos/models/selfsup/cr2pq.py).
# Everything else as cr2pq_vit-tiny_mini.py.
_base_ = './cr2pq_vit-tiny_mini.py'

model = dict(view_consistent_rope=True)
