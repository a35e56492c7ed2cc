"""Environments, one module per paper. :func:`register_envs` adds the gymnasium ids (versioned)."""

from __future__ import annotations


def register_envs() -> None:
    """Register every registered task's gymnasium environments (``Task.gym_envs``: id -> "module:Class",
    imported only on ``gym.make``); idempotent. Plugins' tasks are included."""
    try:
        from gymnasium.envs.registration import register, registry
    except ImportError:  # gymnasium is a dependency, but the suite's core does not need it
        return
    from iclrbench.core import catalog

    for task_cls in catalog.task_classes():
        for env_id, entry_point in task_cls.gym_envs.items():
            if env_id not in registry:
                register(id=env_id, entry_point=entry_point)
