"""Job entry points: wire data, models, algorithms and the engine for one workflow job."""
