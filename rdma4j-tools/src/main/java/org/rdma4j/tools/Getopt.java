// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

/**
 * POSIX {@code getopt(3)} for the librdmacm examples (rping, ucmatose, udaddy, rdma_server, rdma_client), which
 * parse their arguments with it: short options from an option string ({@code "a:p:sc"}: a colon marks an
 * argument), grouped ({@code -vV}) or with the value attached ({@code -p7174}) or separate ({@code -p 7174});
 * parsing stops at the first non-option or at {@code --}; an unknown option or a missing argument is
 * {@code '?'} (the examples set {@code opterr = 0} and print their usage).
 */
final class Getopt {
    private final String[] args;
    private final String spec;
    private int index;
    private int pos = 1;
    private String arg;

    /**
     * @param args the arguments (without the program name)
     * @param spec the option string
     */
    Getopt(String[] args, String spec) {
        this.args = args.clone();
        this.spec = spec;
    }

    /** {@return the next option character, '?' for a bad one, -1 at the end} */
    int next() {
        arg = null;
        if (index >= args.length) {
            return -1;
        }
        String a = args[index];
        if (pos == 1) {
            if (a.equals("--")) {
                index++;
                return -1;
            }
            if (!a.startsWith("-") || a.length() == 1) {
                return -1;
            }
        }
        char c = a.charAt(pos);
        int at = spec.indexOf(c);
        if (at < 0 || c == ':') {
            advance(a);
            return '?';
        }
        boolean takes = at + 1 < spec.length() && spec.charAt(at + 1) == ':';
        if (!takes) {
            advance(a);
            return c;
        }
        if (pos + 1 < a.length()) {
            arg = a.substring(pos + 1);
            index++;
            pos = 1;
            return c;
        }
        index++;
        pos = 1;
        if (index >= args.length) {
            return '?';
        }
        arg = args[index++];
        return c;
    }

    private void advance(String a) {
        pos++;
        if (pos >= a.length()) {
            index++;
            pos = 1;
        }
    }

    /** {@return the current option's argument (optarg)} */
    String arg() {
        return arg;
    }

    /** {@return the index of the first argument not parsed (optind)} */
    int optind() {
        return index;
    }
}
