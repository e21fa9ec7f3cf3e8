"""Record the work a run asked of its control components, then replay it through both twins to time them."""
