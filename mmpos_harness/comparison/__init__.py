"""Seed-repeated comparisons of backbone initialisations (the demo and the
CPU method ranking): :mod:`.runs` pretrains and transfers, :mod:`.seeds`
reads the runs back into one ranked table."""
