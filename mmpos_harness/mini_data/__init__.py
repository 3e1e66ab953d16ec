"""Deterministic mini datasets in the real on-disk formats.

Twelve generators, each writing one dataset directory:

* :func:`make_mini_coco` -- COCO instance segmentation (``annotations/
  instances_{train,val}2017.json`` + ``{train,val}2017/*.jpg``): textured
  circles, squares and triangles of varied size on a textured background,
  occluding one another. Boxes, areas and polygons describe the *visible*
  part of every instance; the polygons rasterise (pycocotools) back to
  exactly that part.
* :func:`make_mini_ade` -- ADE20K layout (``images/{training,validation}/
  *.jpg`` + ``annotations/{training,validation}/*.png``), label 0 meaning
  "other" and ids ``1..6`` (see :data:`MINI_ADE_CLASSES`) each rendered with
  its own colour and texture statistics.
* :func:`make_unlabeled_images` -- a flat folder of JPEG views for
  self-supervised pretraining: random crops of the photographs that
  scikit-image ships inside its package, plus synthetic shape scenes.
* :func:`make_mini_cls` -- image classification in mmpretrain's
  ``CustomDataset`` folder-per-class layout (``{train,val}/<class>/*.jpg``):
  one textured circle, square or triangle per image.
* :func:`make_mini_objects` (the demo's detection task) -- COCO instance
  segmentation whose 8 classes are materials (:data:`MINI_MATERIALS`,
  textures of scikit-image's photographs, brightness, contrast and tint
  jittered alike for all): outline random, appearance names the class;
  small to large instances, occluding one another, on photo backgrounds.
* :func:`make_mini_stuff` (the demo's segmentation task) -- regions of the
  same 8 materials, the grey ones told apart by texture only; read by
  :class:`mmpos_harness.mini_data.datasets.MiniStuffDataset`.
* :func:`make_mini_nyu` (the dense suite's depth probe) -- rooms with
  exact depth maps in NYU-Depth v2's layout (mmseg's ``NYUDataset``).
* :func:`make_mini_layers` (the method ranking's depth probe) -- layers of
  material photographs at known depths, each photograph of one physical
  size, so that its texture's scale in the image is its depth; NYU's
  layout.
* :func:`make_mini_spair` (the correspondence probe) -- image pairs related
  by known homographies, keypoints mapped exactly, in SPair-71k's layout.
* :func:`make_mini_scenes` (the in-context retrieval probe) -- material
  objects on photo backgrounds, semantic labels in Pascal VOC's layout.

The output depends only on the arguments: the same ``seed`` gives
byte-identical files. Each image draws from its own random stream, so image
``i`` of a split does not change with the number of images requested.

Every dataset is written into a hidden temporary sibling of its target and
renamed into place at the end, so an interrupted run never leaves a half
dataset, with its arguments in a marker file (:data:`MARKER`).
:func:`make_all` (the command line) keeps a dataset written with the same
arguments (a re-run is a no-op) and refuses one written with others unless
``force=True``, which replaces it as a whole, but never one without the
marker (a directory these generators did not create) and never with fewer
images than it holds (another guide or study may read them).
"""
import os.path as osp

from ._io import MARKER, _check_sizes, changed_arguments, plan_target
from .ade import MINI_ADE_CLASSES, make_mini_ade
from .cls import make_mini_cls
from .coco import make_mini_coco
from .depth import make_mini_layers, make_mini_nyu
from .materials import MINI_MATERIALS
from .objects import make_mini_objects
from .pairs import make_mini_spair
from .scenes import MINI_SCENES_CLASSES, make_mini_scenes
from .photos import SKIMAGE_PHOTOS, available_skimage_photos
from .shapes import MINI_COCO_CLASSES
from .stuff import make_mini_stuff
from .unlabeled import make_unlabeled_images

__all__ = [
    'EVAL_NUM_VAL', 'MARKER', 'MINI_ADE_CLASSES', 'MINI_COCO_CLASSES',
    'MINI_MATERIALS', 'MINI_SCENES_CLASSES', 'NUM_VAL', 'SKIMAGE_PHOTOS',
    'available_skimage_photos', 'changed_arguments', 'make_all', 'make_mini_ade', 'make_mini_cls',
    'make_mini_coco', 'make_mini_layers', 'make_mini_nyu',
    'make_mini_objects',
    'make_mini_scenes', 'make_mini_spair', 'make_mini_stuff',
    'make_unlabeled_images', 'requested'
]

# Validation images of :func:`make_all` when ``num_val`` is not given:
# NUM_VAL, except the evaluation sets in EVAL_NUM_VAL, whose metrics one
# image or query must move by at most 0.5 point (>= 200 of them).
NUM_VAL = 16
EVAL_NUM_VAL = dict(cls=240, scenes=256, nyu=256, layers=256, spair=320)


def make_all(root, which=('coco', 'ade', 'unlabeled'), num_train=64,
             num_val=None, num_unlabeled=256, img_size=128, seed=0,
             force=False):
    """Write the chosen mini datasets (``'coco'``, ``'ade'``,
    ``'unlabeled'``, ``'cls'``, ``'objects'``, ``'stuff'``, ``'nyu'``,
    ``'layers'``, ``'spair'``, ``'scenes'``) to ``root/<name>``; see the
    individual generators. ``num_val`` applies to every labelled dataset;
    ``None``: :data:`NUM_VAL` (16), except :data:`EVAL_NUM_VAL` (``cls``:
    240 kNN queries, ``scenes``: 256 retrieval images).

    Returns:
        dict: Dataset name -> absolute path written.
    """
    def val(name):
        return requested(name, num_val=num_val)['num_val']

    makers = {
        'coco': lambda path: make_mini_coco(
            path, num_train, val('coco'), img_size, seed, force=force),
        'ade': lambda path: make_mini_ade(
            path, num_train, val('ade'), img_size, seed, force=force),
        'unlabeled': lambda path: make_unlabeled_images(
            path, num_unlabeled, img_size, seed, force=force),
        'cls': lambda path: make_mini_cls(
            path, num_train, val('cls'), img_size, seed, force=force),
        'objects': lambda path: make_mini_objects(
            path, num_train, val('objects'), img_size, seed, force=force),
        'stuff': lambda path: make_mini_stuff(
            path, num_train, val('stuff'), img_size, seed, force=force),
        'nyu': lambda path: make_mini_nyu(
            path, num_train, val('nyu'), img_size, seed, force=force),
        'layers': lambda path: make_mini_layers(
            path, num_train, val('layers'), img_size, seed, force=force),
        'spair': lambda path: make_mini_spair(
            path, num_train, val('spair'), img_size, seed, force=force),
        'scenes': lambda path: make_mini_scenes(
            path, num_train, val('scenes'), img_size, seed, force=force),
    }
    unknown = sorted(set(which) - set(makers))
    if unknown:
        raise ValueError(f'unknown datasets {unknown}; choose from '
                         f'{sorted(makers)}')
    # Refuse before writing anything rather than after the first dataset.
    _check_sizes(img_size, num_train=num_train, num_unlabeled=num_unlabeled,
                 **{f'num_val of {name}': val(name) for name in which
                    if name != 'unlabeled'})
    paths = {name: osp.abspath(osp.join(root, name)) for name in which}
    todo = [name for name in which if plan_target(
        paths[name], requested(name, num_train, num_val, num_unlabeled,
                               img_size, seed), force)]
    for name in which:
        if name in todo:
            makers[name](paths[name])
        else:
            print(f'{paths[name]}: written with the same arguments, kept')
    return paths


def requested(name, num_train=64, num_val=None, num_unlabeled=256,
              img_size=128, seed=0):
    """The marker entries that :func:`make_all`'s arguments give dataset
    ``name`` (``num_val=None``: its default validation size)."""
    if name == 'unlabeled':
        return dict(dataset=name, num_images=num_unlabeled,
                    img_size=img_size, seed=seed)
    return dict(dataset=name, num_train=num_train,
                num_val=EVAL_NUM_VAL.get(name, NUM_VAL) if num_val is None
                else num_val, img_size=img_size, seed=seed)
