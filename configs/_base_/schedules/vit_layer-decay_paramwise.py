# Parameter-wise settings shared by every ViT fine-tuning schedule: no weight
# decay on norms, biases, tokens and positional tables; layer-wise lr decay
# (the rate is set by each schedule).
vit_paramwise_cfg = dict(
    norm_decay_mult=0.,
    flat_decay_mult=0.,
    custom_keys={
        '.cls_token': dict(decay_mult=0.),
        '.pos_embed': dict(decay_mult=0.),
        '.freqs': dict(decay_mult=0.),
    })
