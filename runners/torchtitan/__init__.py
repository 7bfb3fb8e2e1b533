"""torchtitan as a framework: recipe model, resolve worker and adapter."""
