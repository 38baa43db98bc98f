"""TL103 behaviour the VALID/INVALID snippets cannot state: messages, fix hints, and the cases
that decide between a detach, a continuation and a reset."""

from __future__ import annotations

from textwrap import dedent

import pytest

from torchlint.engine import lint_source
from torchlint.rules import rules_by_code

RULE = rules_by_code()["TL103"]


def findings(source: str):
    return lint_source(dedent(source), "<test>", [RULE], prefilter=False)


def test_message_names_every_state_in_order_and_flags_retain_graph():
    [finding] = findings("""\
        for epoch in range(5):
            h0, c0 = torch.zeros(2, 4, 8), torch.zeros(2, 4, 8)
            for batch in loader:
                optimizer.zero_grad()
                output, (h0, c0) = lstm(batch[0], (h0, c0))
                loss_fn(output, batch[1]).backward(retain_graph=True)
                optimizer.step()
        """)
    assert finding.line == 5
    assert "`h0`, `c0`" in finding.message
    assert "retain_graph=True" in finding.message
    assert "`h0, c0 = h0.detach(), c0.detach()`" in finding.help


def test_stored_state_message_says_it_lives_across_training_steps():
    [finding] = findings("""\
        class Stateful(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(8, 16)
                self.hidden = None

            def forward(self, x):
                out, self.hidden = self.rnn(x, self.hidden)
                return out

        model = Stateful()
        for x in chunks:
            model(x).pow(2).mean().backward()
        """)
    assert finding.line == 8
    assert "across training steps" in finding.message
    assert "detach_state()" in finding.help


def test_stored_state_without_a_training_loop_in_the_file_is_not_reported():
    # a library module: whoever trains it may detach between steps
    assert findings("""\
        class Stateful(nn.Module):
            def forward(self, x):
                out, self.hidden = self.rnn(x, self.hidden)
                return out

        def fit(model, loader):
            for x in loader:
                model(x).sum().backward()
        """) == []


def test_stored_state_reset_by_a_method_the_loop_calls_is_not_reported():
    assert findings("""\
        class Stateful(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(8, 16)
                self.hidden = None

            def reset(self):
                self.hidden = None

            def forward(self, x):
                out, self.hidden = self.rnn(x, self.hidden)
                return out

        model = Stateful()
        for x in chunks:
            model.reset()
            model(x).pow(2).mean().backward()
        """) == []


@pytest.mark.parametrize("detach", [
    "[state.detach_() for state in hidden]",
    "hidden[0].detach_(); hidden[1].detach_()",
])
def test_in_place_detach_of_the_state_counts(detach):
    assert findings(f"""\
        hidden = model.init_hidden(8)
        for x, y in batches:
            {detach}
            logits, hidden = model(x, hidden)
            criterion(logits, y).backward()
        """) == []


def test_in_place_detach_of_something_else_does_not_count():
    [finding] = findings("""\
        hidden = model.init_hidden(8)
        for x, y in batches:
            logits, hidden = model(x, hidden)
            logits.detach_()
            criterion(logits, y).backward()
        """)
    assert finding.line == 3


def test_local_helper_is_judged_by_what_it_returns():
    source = """\
        def {name}(model, x, hidden):
            return {body}

        hidden = model.init_hidden(8)
        for x, y in batches:
            hidden = {name}(model, x, hidden)
            logits, hidden = model(x, hidden)
            criterion(logits, y).backward()
        """
    detaching = source.format(name="refresh", body="tuple(h.detach() for h in hidden)")
    continuing = source.format(name="refresh", body="model(x, hidden)[1]")
    assert findings(detaching) == []
    assert [f.line for f in findings(continuing)] == [7]


def test_grad_disabled_feed_is_not_reported():
    assert findings("""\
        hidden = model.init_hidden(8)
        for x, y in batches:
            with torch.no_grad():
                _, hidden = model(x, hidden)
            logits = head(hidden[0])
            criterion(logits, y).backward()
        """) == []


def test_fresh_state_under_a_condition_without_backward_does_not_reset():
    [finding] = findings("""\
        h = torch.zeros(4, 16)
        for step, (x, y) in enumerate(stream):
            if step % 100 == 0:
                h = torch.zeros(4, 16)
            h = cell(x, h)
            F.mse_loss(head(h), y).backward()
        """)
    assert finding.line == 5


def test_loop_target_is_a_fresh_state_every_iteration():
    assert findings("""\
        for x, hidden in pairs:
            logits, hidden = model(x, hidden)
            criterion(logits, hidden).backward()
        """) == []


def test_fresh_value_earlier_in_the_feeds_own_branch_resets_it():
    # same branch: whenever the feed runs it reads this iteration's value
    assert findings("""\
        for x, y in stream:
            if flag:
                h = encoder(x)
                h = cell(y, h)
                F.mse_loss(head(h), y).backward()
        """) == []
    # the other branch of the same `if`: on `else` iterations the old state is fed back
    [finding] = findings("""\
        for x, y in stream:
            if flag:
                h = encoder(x)
            else:
                h = cell(y, h)
            F.mse_loss(head(h), y).backward()
        """)
    assert finding.line == 5
