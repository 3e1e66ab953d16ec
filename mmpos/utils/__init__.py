from .launch import (check_work_dir, load_config, prepare_cpu_distributed,
                     resolve_work_dir)

__all__ = [
    'check_work_dir', 'load_config', 'prepare_cpu_distributed',
    'resolve_work_dir'
]
