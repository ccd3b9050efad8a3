"""Client partitions: the label, feature and domain schemes, their shared pieces, the folds."""
