# One target per paper (`snakemake adapters`) and per item (`snakemake adapters_table1`).
for _paper, _items in PLAN.papers.items():
    for _item in _items:

        rule:
            name:
                f"{_paper}_{_item}"
            input:
                item_outputs(_paper, _item),
            localrule: True

    rule:
        name:
            _paper
        input:
            paper_outputs(_paper),
        localrule: True
