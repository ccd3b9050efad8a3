"""What the paper scale costs and what each of its Slurm jobs asks: FLOPs, kernel and memory
counts on the meta device (``flops``, ``job_memory``), the work and step-time model with its
per-step floor, calibration, partition limits and packs of small jobs (``work``), the paper
cost per paper and item (``estimate``) and the cost of any targets before they run
(``target_cost``). Production, not benchmarking: ``fedrepro.bench`` times the engine."""
