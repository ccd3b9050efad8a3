rule table:
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
    conda:
        ENV
    params:
        title=lambda wildcards: item_text(wildcards, "title"),
        caption=lambda wildcards: item_text(wildcards, "caption"),
        runs=f"{R}/runs",
    shell:
        "python workflow/scripts/make_table.py --manifest {input.manifest} --runs-dir {params.runs}"
        " --out-prefix $(dirname {output.md})/{wildcards.item} > {log} 2>&1"


rule figure:
    input:
        unpack(item_inputs),
    output:
        png=report(
            f"{R}/figures/{{paper}}/{{item}}.png",
            caption="../../report/figure.rst",
            category="{paper}",
            subcategory="Figures",
            labels={"item": "{item}"},
        ),
        pdf=f"{R}/figures/{{paper}}/{{item}}.pdf",
    log:
        f"{R}/logs/items/{{paper}}/{{item}}.log",
    conda:
        ENV
    params:
        title=lambda wildcards: item_text(wildcards, "title"),
        caption=lambda wildcards: item_text(wildcards, "caption"),
        runs=f"{R}/runs",
        partitions=f"{R}/partitions",
    shell:
        "python workflow/scripts/make_figure.py --manifest {input.manifest} --runs-dir {params.runs}"
        " --partitions-dir {params.partitions} --out-prefix $(dirname {output.png})/{wildcards.item}"
        " > {log} 2>&1"


rule claims:
    input:
        unpack(claims_inputs),
    output:
        csv=f"{R}/claims/{{paper}}.csv",
        html=report(
            f"{R}/claims/{{paper}}.html",
            caption="../../report/claims.rst",
            category="{paper}",
            subcategory="Claims",
            labels={"item": "claims"},
        ),
    log:
        f"{R}/logs/claims/{{paper}}.log",
    conda:
        ENV
    params:
        runs=f"{R}/runs",
    shell:
        "python workflow/scripts/make_claims.py --spec {input.spec} --manifests {input.manifests}"
        " --runs-dir {params.runs} --out-prefix $(dirname {output.csv})/{wildcards.paper}"
        " > {log} 2>&1"
