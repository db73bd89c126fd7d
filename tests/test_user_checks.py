"""Checks a user made of the merged hardening and inference work (issue 11, 12, 13)."""

import pytest

from multiverse.tables._places import PlaceError, check_output_dir


def test_non_empty_out_folder_message_reads_well(tmp_path):
    # Found by hand: `import table ... --out .` said "is not a import folder".
    (tmp_path / "other.txt").write_text("x")
    with pytest.raises(PlaceError) as caught:
        check_output_dir(tmp_path, kind="import")
    message = str(caught.value)
    assert "not an import folder" in message
    assert "\n" not in message
