from .launch import (check_work_dir, load_config, start_cpu_process_group,
                     work_dir_lock)

__all__ = [
    'check_work_dir', 'load_config', 'start_cpu_process_group',
    'work_dir_lock'
]
