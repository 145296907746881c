"""What the provider reports: job timelines (`timeline`), disruption summaries
(`disruption_report`), metrics and their names (`telemetry`, `metrics`)."""
