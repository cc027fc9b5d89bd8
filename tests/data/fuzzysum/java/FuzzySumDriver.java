// Driver around the original net.spatula.utils.FuzzySum, used to make the vectors in ../extra
// and to check Java semantics that the Python port relies on. Not part of the test run.
//
// Build and run (OpenJDK 17, locale en-US as for the public vectors):
//   javac -d /tmp/fsj net/spatula/utils/FuzzySum.java FuzzySumDriver.java
//   java -Duser.language=en -Duser.country=US -cp /tmp/fsj FuzzySumDriver MODE ARGS
//
// Modes (IN: one input per line, base64 of the raw bytes, decoded as the public vectors were,
// with new String(bytes, UTF_8)):
//   files F...     "<digest>\t<F>" for each file F
//   batch IN       one digest per line of IN
//   decode IN      per line: base64 of the decoded text as UTF-16BE (replacement characters)
//   lower IN       per line: base64 of text.toLowerCase() as UTF-16BE
//   classes        code points >= 128 whose toLowerCase() holds an ASCII character, ASCII
//                  characters whose toLowerCase() is not the plain one, and the code points
//                  matched by \s and \w

import java.io.BufferedReader;
import java.io.FileReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Base64;
import java.util.regex.Pattern;

import net.spatula.utils.FuzzySum;

public class FuzzySumDriver {

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        StringBuilder out = new StringBuilder();
        if (mode.equals("files")) {
            for (int i = 1; i < args.length; i++) {
                byte[] data = Files.readAllBytes(Paths.get(args[i]));
                String text = new String(data, StandardCharsets.UTF_8);
                out.append(FuzzySum.checkSum(text)).append('\t').append(args[i]).append('\n');
            }
        } else if (mode.equals("classes")) {
            for (int cp = 0; cp <= 0x10FFFF; cp++) {
                if (cp >= 0xD800 && cp <= 0xDFFF) continue;
                String s = new String(Character.toChars(cp));
                String low = s.toLowerCase();
                boolean ascii = false;
                for (int j = 0; j < low.length(); j++) {
                    if (low.charAt(j) < 128) ascii = true;
                }
                if (cp >= 128 && ascii) out.append("lower\t").append(cp).append('\t').append(hex(low)).append('\n');
                if (cp < 128 && !low.equals(s.toLowerCase(java.util.Locale.ROOT))) out.append("asciilower\t").append(cp).append('\n');
                if (cp < 128 && !low.equals(cp >= 'A' && cp <= 'Z' ? String.valueOf((char) (cp + 32)) : s))
                    out.append("asciilower\t").append(cp).append('\n');
                if (Pattern.matches("\\s", s)) out.append("space\t").append(cp).append('\n');
                if (Pattern.matches("\\w", s)) out.append("word\t").append(cp).append('\n');
            }
        } else {
            Base64.Decoder dec = Base64.getDecoder();
            Base64.Encoder enc = Base64.getEncoder();
            try (BufferedReader in = new BufferedReader(new FileReader(args[1], StandardCharsets.US_ASCII))) {
                String line;
                while ((line = in.readLine()) != null) {
                    String text = new String(dec.decode(line), StandardCharsets.UTF_8);
                    if (mode.equals("batch")) {
                        out.append(FuzzySum.checkSum(text));
                    } else if (mode.equals("decode")) {
                        out.append(enc.encodeToString(text.getBytes(StandardCharsets.UTF_16BE)));
                    } else if (mode.equals("lower")) {
                        out.append(enc.encodeToString(text.toLowerCase().getBytes(StandardCharsets.UTF_16BE)));
                    } else {
                        throw new IllegalArgumentException("unknown mode " + mode);
                    }
                    out.append('\n');
                }
            }
        }
        System.out.print(out);
    }

    private static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (int j = 0; j < s.length(); j++) {
            if (j > 0) b.append(' ');
            b.append(Integer.toHexString(s.charAt(j)));
        }
        return b.toString();
    }
}
