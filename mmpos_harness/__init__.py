"""mmpos' reproduction harness: everything that *uses* the library to
produce the README's numbers, kept out of the installed ``mmpos`` package.

* :mod:`mmpos_harness.mini_data` -- the deterministic mini datasets (COCO,
  ADE20K, unlabeled views, classification, the demo's material tasks) and,
  in :mod:`mmpos_harness.mini_data.datasets`, the dataset classes that the
  mini configs name (``custom_imports=dict(imports=['mmpos',
  'mmpos_harness.mini_data.datasets'])``);
* :mod:`mmpos_harness.comparison` -- seed-repeated comparisons of backbone
  initialisations: the runs (:mod:`~mmpos_harness.comparison.runs`) and
  their table (:mod:`~mmpos_harness.comparison.seeds`);
* :mod:`mmpos_harness.demo` and :mod:`mmpos_harness.method_ranking` -- the
  two comparisons the README reports (``tools/demo.py``,
  ``tools/paper_tables/method_ranking.py``);
* :mod:`mmpos_harness.paper_tables` -- the manifest of the papers' tables,
  the commands that launch its missing runs and the tables themselves
  (``tools/paper_tables/run.py``, ``gen_tables.py``);
* :mod:`mmpos_harness.results` -- reading finished mmengine work dirs.

It imports ``mmpos``; ``mmpos`` never imports it (tests/harness/test_harness_split.py).
The runs it starts are ``tools/*.py`` subprocesses of this repository, so it
is used from a checkout (``pip install -e .`` installs both packages).
"""
