"""Reports: plots shared by notebooks and the papermill report driver."""
