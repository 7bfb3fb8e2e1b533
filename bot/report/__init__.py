"""The campaign report: its data model, the judgement section, the plot and the writer."""
