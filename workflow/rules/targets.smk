# One target per paper (`snakemake adapters`) and per item (`snakemake adapters_table1`).
for _paper, _items in PLAN.papers.items():
    for _item in _items:

        rule:
            """A target: one item of a paper (its table or figure, and the runs it reads)."""
            name:
                f"{_paper}_{_item}"
            input:
                item_outputs(_paper, _item),
            localrule: True

    rule:
        """A target: every item and the claims of one paper."""
        name:
            _paper
        input:
            paper_outputs(_paper),
        localrule: True
