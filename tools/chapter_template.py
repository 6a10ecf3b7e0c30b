# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# <!--
# Chapter template (jupytext percent format). Copy it to /tmp/<you>/NN.py, write the chapter,
# then convert and normalise:
#
#     jupytext --to ipynb -o notebooks/NN_name.ipynb /tmp/<you>/NN.py
#     python tools/sync_notebooks.py notebooks/NN_name.ipynb
#
# Delete this comment cell. Rules the tests check (tests/test_notebooks.py):
#   * cell 1 is the Colab cell exactly as tools/sync_notebooks.py writes it (from _config.yml's
#     repository.url: never type the URL yourself; the sync tool fills it in);
#   * cell 2 calls lv.setup_notebook();
#   * a "Learning goals" heading, at least one lv.show_source(...), an "Exercises" heading with
#     solutions in code cells tagged hide-cell that assert something, and a "Summary" heading;
#   * the .ipynb is committed without outputs (the sync tool strips them).
# Also: every number computed by a cell; >= 1 llmviz.plots figure naming device and sizes
# (llmviz.plots.provenance); >= 1 explorer as the LAST expression of a cell; sizes through
# lv.pick(cpu=..., full=...); the whole notebook < 90 s on a 2-core CPU
# (time LLMVIZ_BUILD=1 jupyter execute notebooks/NN_name.ipynb).
# -->

# %% tags=["remove-cell"]
# Colab only: install llmviz from the book's repository. Elsewhere this cell does
# nothing: install llmviz yourself (see the book's 'How to use this book' page).
import sys

if "google.colab" in sys.modules:
    # %pip install -q "llmviz @ git+REPOSITORY_URL@BRANCH"   (written by tools/sync_notebooks.py)
    pass

# %% tags=["hide-cell"]
import llmviz as lv

lv.setup_notebook()

# %% [markdown]
# # N. Chapter title
#
# (The number is part of the title, e.g. "# 7. RoPE": the table of contents does not number.)
#
# One paragraph: what this chapter takes apart and why a reader should care.
#
# ```{admonition} Learning goals
# :class: tip
# After this chapter you can
# - ...
# - ...
# ```

# %% [markdown]
# ## The idea
#
# Prose in your own words, with a citation: {cite}`vaswani2017attention`.
# The library's own code, shown and then used:

# %%
from llmviz.attention import scaled_dot_product_attention

lv.show_source(scaled_dot_product_attention)

# %% [markdown]
# ## An experiment
#
# Sizes come from `lv.pick`, so `LLMVIZ_SCALE=full` runs the real-size version on a GPU.

# %%
import torch

from llmviz.plots import provenance

device = lv.device()
T = lv.pick(cpu=64, full=1024)
# ... compute, then draw with llmviz.plots; put provenance(device, T=T) in the title/footnote.

# %% [markdown]
# ```{admonition} Claim under test: "a popular claim, quoted"
# :class: warning
# What the claim says, and the experiment below that decides it.
# ```

# %% [markdown]
# ## Explore
#
# An explorer is the LAST expression of its cell: widgets in a live kernel, plotly sliders on
# the site.

# %%
# from llmviz.explore.attention import some_explorer
# some_explorer()

# %% [markdown]
# ## Exercises
#
# 1. A question the reader answers by running code.

# %% tags=["hide-cell"]
# Solution to exercise 1: it checks itself.
answer = 2 + 2
assert answer == 4

# %% [markdown]
# ## Summary
#
# - The three to five things to remember.
