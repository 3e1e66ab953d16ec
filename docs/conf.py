"""Sphinx configuration of the mmpos docs (Sphinx + MyST, as OpenMMLab).

Build: ``make docs`` (warnings are errors; every internal link and every
repository path a page mentions is checked).
"""
import os
import sys

DOCS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(DOCS)
sys.path.insert(0, os.path.join(DOCS, '_ext'))
sys.path.insert(0, REPO)

project = 'mmpos'
copyright = 'mmpos contributors'
author = 'mmpos contributors'

extensions = ['myst_parser', 'mmpos_docs']
source_suffix = {'.md': 'markdown'}
root_doc = 'index'
exclude_patterns = ['_build', '_generated', 'README.md']

myst_enable_extensions = ['colon_fence', 'dollarmath']
myst_heading_anchors = 4
# a link to a page or heading that does not exist is a warning (error)
nitpicky = True

html_theme = 'furo'
html_title = 'mmpos'
html_static_path = []
html_show_sourcelink = False

mmpos_repo_root = REPO
mmpos_paper_work_root = os.environ.get('MMPOS_PAPER_WORK_ROOT',
                                       'work_dirs/paper_tables')
