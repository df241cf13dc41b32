// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.util.ArrayList;
import java.util.List;

/** A {@link StateTrace} that records "role STATE" per state entered, for tests that check the sequence. */
final class RecordingTrace implements StateTrace {
    private final List<String> states = new ArrayList<>();

    @Override
    public synchronized void enter(SoftQp qp, String role, Enum<?> state, int psn) {
        states.add(role + " " + state.name());
    }

    /** {@return the states recorded for {@code role}, in order, and forgets every recorded state} */
    synchronized List<String> take(String role) {
        List<String> out = new ArrayList<>();
        for (String s : states) {
            if (s.startsWith(role + " ")) {
                out.add(s.substring(role.length() + 1));
            }
        }
        states.clear();
        return out;
    }
}
