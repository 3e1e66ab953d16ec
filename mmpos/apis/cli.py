"""Command-line arguments shared by the tools that load a backbone
(``tools/analysis_tools/{knn_eval,extract_features,feature_pictures}.py``)."""
import argparse


def backbone_parser(doc: str, images: bool = True) -> argparse.ArgumentParser:
    """``CONFIG CHECKPOINT [IMAGE ...] [--prefix backbone.] [--device cpu]``
    with the first line of ``doc`` as the description."""
    parser = argparse.ArgumentParser(description=doc.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    if images:
        parser.add_argument('images', nargs='+')
    parser.add_argument('--prefix', default='backbone.',
                        help='key prefix of the backbone in the checkpoint, '
                        'e.g. teacher.module.backbone.')
    parser.add_argument('--device', default='cpu')
    return parser
