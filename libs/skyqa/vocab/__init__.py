"""Vocabulary several stages share: the behavior library and its words, the direction label
spaces with the geometry behind them, and the prompts with their answer contract.

The mission planner samples behaviors that the QA generator names and the evaluator scores;
the QA generator asks in the label spaces the evaluator's baselines answer in. Keeping the
vocabulary here lets each stage stay sealed (a service imports only ``skyqa``).
"""
