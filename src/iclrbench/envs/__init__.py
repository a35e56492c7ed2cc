"""Environments, one module per paper. :func:`register_envs` adds the gymnasium ids (versioned)."""

from __future__ import annotations

#: gymnasium id -> entry point ("module:attribute"); gymnasium imports the module only on make()
GYM_ENVS = {
    "iclrbench/ContextualBilateralTrade-v0": "iclrbench.envs.bilateral_trade:ContextualBilateralTradeEnv",
}


def register_envs() -> None:
    """Register every environment with gymnasium, if gymnasium is installed; idempotent."""
    try:
        from gymnasium.envs.registration import register, registry
    except ImportError:  # gymnasium is a dependency, but the suite's core does not need it
        return
    for env_id, entry_point in GYM_ENVS.items():
        if env_id not in registry:
            register(id=env_id, entry_point=entry_point)
