"""A perf/ script (no .py suffix) loaded as a module, so that its pure
functions can be tested without running it."""
import importlib.machinery
import importlib.util
import os


def load(root, name):
    """perf/<name> of the tree at `root`, as module perf_<name>."""
    module_name = "perf_" + name.replace("-", "_").replace(".", "_")
    loader = importlib.machinery.SourceFileLoader(module_name, os.path.join(root, "perf", name))
    spec = importlib.util.spec_from_loader(module_name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
