"""python3 -m reports STUDY [ARGS]: the report of one study (its own --help says the arguments)."""
import importlib
import sys

# study name -> (module, what it writes)
STUDIES = {
    "paper": ("paper_report", "the paper experiment's tables: steps and modelled time to the target"),
    "metrics-plots": ("plot_metrics", "the paper experiment's perplexity curves"),
    "convergence": ("convergence_report", "the convergence study's tables and Pareto plots"),
    "lr-sweep": ("lr_sweep_report", "the learning-rate sweep's best rates and plots"),
    "outer": ("outer_report", "the outer-optimizer study: local SGD, DiLoCo and A2SGD at equal bytes"),
    "network": ("network_report", "time to a target over an emulated network"),
    "network-model": ("network_model_report", "the netbench runs against the alpha-beta model"),
    "network-steps": ("plot_network_steps", "step times over the emulated network"),
    "scaling": ("scaling_report", "the scaling study: measured convergence and the projection"),
    "bench": ("plot_bench", "a2sgd-bench's CSV as plots"),
    "docs": ("docs_blocks", "every generated block and figure of the docs: --write, --check, --list"),
}


def usage():
    lines = ["usage: python3 -m reports STUDY [ARGS]   (python3 -m reports STUDY --help: its arguments)", "",
             "studies:"]
    lines += [f"  {name:<14} {what} (reports/{module}.py)" for name, (module, what) in STUDIES.items()]
    return "\n".join(lines)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name = argv[0]
    if name not in STUDIES:
        print(f"reports: no study {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"reports.{STUDIES[name][0]}")
    sys.argv = [f"python3 -m reports {name}"] + argv[1:]
    return module.main()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
