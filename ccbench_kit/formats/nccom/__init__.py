"""nccom-test (AWS Neuron): its table and ``--report-to-json-file`` JSON, read and written."""
