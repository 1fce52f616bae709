"""`RowError`: a problem of one example in a batch, which says which one. `kbert predict
--input` names that example by its line in the request file rather than its row in the chunk,
by the error's `row`, not by reading its message."""


class RowError(ValueError):
    """ValueError about row `row` (from 0) of a batch. `template` is the message with
    "{where}" for the row ("the question of {where} is blank"); `at(where)` words it for a
    caller that knows the row by another name ("line 7")."""

    def __init__(self, template, row):
        self.template, self.row = template, int(row)
        super().__init__(self.at(f"row {self.row}"))

    def at(self, where):
        return self.template.replace("{where}", where)  # not format: the text may hold braces

    def __reduce__(self):  # a picklable exception takes its constructor's arguments back
        return type(self), (self.template, self.row)
