"""Moved: `JobRecipe` is `airflow_gang.kinds.recipe`'s, each kind's recipe its own package's."""

from airflow_gang.kinds.pytorchjob.recipe import pytorchjob_recipe
from airflow_gang.kinds.recipe import JobRecipe, recipe_of
from airflow_gang.kinds.trainjob.recipe import trainjob_recipe

__all__ = ["JobRecipe", "pytorchjob_recipe", "recipe_of", "trainjob_recipe"]
