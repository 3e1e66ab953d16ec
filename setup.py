import os.path as osp

from setuptools import find_packages, setup


def read_version():
    namespace = {}
    with open(osp.join(osp.dirname(__file__), 'mmpos', 'version.py')) as f:
        exec(f.read(), namespace)
    return namespace['__version__']


def read_requirements(name):
    """Requirement lines of ``requirements/<name>.txt`` without ``-r`` includes."""
    path = osp.join(osp.dirname(__file__), 'requirements', name)
    with open(path) as f:
        return [
            line.split('#')[0].strip() for line in f
            if line.split('#')[0].strip() and not line.startswith('-r')
        ]


setup(
    name='mmpos',
    version=read_version(),
    description='Position-aware self-supervised pretraining and transfer '
    'for vision transformers, on the OpenMMLab stack',
    # the library, its torch-only position schemes, its statistics (numpy
    # and scipy only) and, beside them, the harness that reproduces the
    # README's numbers with it (mini data, demo, method ranking, paper
    # tables)
    packages=find_packages(include=('mmpos', 'mmpos.*', 'mmpos_harness',
                                    'mmpos_harness.*', 'mmpos_positions',
                                    'mmpos_stats')),
    python_requires='>=3.9',
    install_requires=read_requirements('build.txt') +
    read_requirements('runtime.txt'),
    extras_require={'tests': read_requirements('tests.txt')},
    zip_safe=False,
)
