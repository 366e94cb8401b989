"""Other tools' files, read and written side by side, one folder per tool.

=================  ==============================  ===============================
tool               read (``importers``)            write
=================  ==============================  ===============================
nccl-tests         ``nccl_tests.read_text``        ``nccl_tests.write_table`` (the
                   (printed logs),                 CLI's table), ``nccl_tests.
                   ``nccl_tests.read_json``        write_json`` (``-J``, for
                   (``-J``)                        ``--json-format nccl-tests``)
nccom-test         ``nccom.read_text`` (table),    ``nccom.write_json``
                   ``nccom.read_json``             (``--report-to-json-file``)
AllgatherP bench   ``allgatherp.read_text``        --
CSV                --                              ``csv.write`` (``ccbench export``)
=================  ==============================  ===============================

``common`` holds what every reader shares: the `Source` text and its printed
rounding, `Table` -> Dataset (`common.build.to_dataset`, which recomputes the
bandwidths with the collective's bus factor) and the errors.

The entry points stay where users look: ``ccbench_kit.importers`` reads any
file (its `readers` list says which module reads what, tried in order) and
``ccbench_kit.output`` writes the JSON formats by name.  A reader module has
``NAME``, ``sniff(src, head)`` and ``parse(src, hints) -> [Dataset]``; a JSON
writer takes a Dataset and returns the document.  Imports run one way:
formats -> dataset, collectives, dtypes; nothing below imports formats.
"""
