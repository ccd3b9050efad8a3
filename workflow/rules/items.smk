# Items read exactly the result files their manifest names (`item_inputs`); one script
# builds every kind through its registered builder (fedrepro.experiments.items).


rule table:
    """Build one table (or payload / parameter table) item from the result files its manifest
    names."""
    input:
        unpack(item_inputs),
    output:
        md=f"{R}/tables/{{paper}}/{{item}}.md",
        tex=f"{R}/tables/{{paper}}/{{item}}.tex",
        csv=f"{R}/tables/{{paper}}/{{item}}.csv",
        html=report(
            f"{R}/tables/{{paper}}/{{item}}.html",
            caption="../../report/table.rst",
            category="{paper}",
            subcategory="Tables",
            labels={"item": "{item}"},
        ),
    log:
        f"{R}/logs/items/{{paper}}/{{item}}.log",
    benchmark:
        f"{R}/benchmarks/items/{{paper}}/{{item}}.tsv"
    conda:
        ENV
    resources:
        **resources("item"),
    params:
        manifest=item_manifest,
        title=lambda wildcards: item_text(wildcards, "title"),
        caption=lambda wildcards: item_text(wildcards, "caption"),
        cells=item_cells,
    script:
        "../scripts/make_item.py"


use rule table as figure with:
    output:
        png=report(
            f"{R}/figures/{{paper}}/{{item}}.png",
            caption="../../report/figure.rst",
            category="{paper}",
            subcategory="Figures",
            labels={"item": "{item}"},
        ),
        pdf=f"{R}/figures/{{paper}}/{{item}}.pdf",


rule claims:
    """Evaluate a paper's claims on our results and on the paper's reported numbers."""
    input:
        unpack(claims_inputs),
    output:
        csv=f"{R}/claims/{{paper}}.csv",
        md=f"{R}/claims/{{paper}}.md",
        html=report(
            f"{R}/claims/{{paper}}.html",
            caption="../../report/claims.rst",
            category="{paper}",
            subcategory="Claims",
            labels={"item": "claims"},
        ),
    log:
        f"{R}/logs/claims/{{paper}}.log",
    benchmark:
        f"{R}/benchmarks/claims/{{paper}}.tsv"
    conda:
        ENV
    resources:
        **resources("claims"),
    params:
        spec=lambda wildcards: PLAN.claims[wildcards.paper],
        manifests=claims_manifests,
    script:
        "../scripts/make_claims.py"


# the report's first page: workflow.rst includes its fragment when the report holds it
rule overview:
    """How each paper reproduces: items regenerated, our cells against the paper's (a
    scatter), claims on both, the paper-scale cost."""
    input:
        overview_inputs(),
        contents=CONTENTS,
        cost=f"{B}/cost.json",
    output:
        csv=f"{R}/overview.csv",
        md=f"{R}/overview.md",
        cells=f"{R}/overview_cells.csv",
        fragment=f"{R}/overview_fragment.html",
        html=report(
            f"{R}/overview.html",
            caption="../../report/overview.rst",
            category="Overview",
            labels={"item": "how each paper reproduces"},
        ),
        png=report(
            f"{R}/overview.png",
            caption="../../report/overview.rst",
            category="Overview",
            labels={"item": "ours against the paper's"},
        ),
        pdf=f"{R}/overview.pdf",
    log:
        f"{R}/logs/overview.log",
    conda:
        ENV
    resources:
        **resources("claims"),
    params:
        spec=overview_spec(),
    script:
        "../scripts/make_overview.py"
