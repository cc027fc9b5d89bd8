// Nick Johnson's FuzzySum, copied from seeds/002_a377762f420dcf98.txt.
// Only change: `ArrayList sums` -> `ArrayList<Double> sums` (the raw type does not compile).
package net.spatula.utils;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.regex.Pattern;

public class FuzzySum {

    private static final int ROUND_TO = 17;
    private static final int AVG_SIZE = 11; // our amp goes to 11.

    public static String checkSum(String text) {
        text = text.toLowerCase();
        text = text.replaceAll("<[^>]*>", ""); // strip HTML tags
        Pattern pattern = Pattern.compile("\\s+", Pattern.DOTALL);
        String[] wordlist = pattern.split(text);

        long x = -1;
        long y = -1;
        double distanceSum = 0;
        long sumCount = 0;
        ArrayList<Double> sums = new ArrayList(wordlist.length / AVG_SIZE);

        for (int i = 0; i < wordlist.length; i++) {
            String word = wordlist[i].replaceAll("\\W", "");
            String vowels = word.replaceAll("[^aeiouy]", "");
            String consonants = word.replaceAll("[aeiouy]", "");
            long thisx = round(sumChars(vowels) * 3);
            long thisy = round(sumChars(consonants));
            if (thisx == 0 && thisy == 0)
                continue;
            if (x > 0 && y > 0) {
                distanceSum += Math.sqrt(Math.pow(thisx - x, 2) + Math.pow(thisy - y, 2));
                sumCount++;
            }
            if (sumCount > 0 && sumCount % AVG_SIZE == 0) { 
                sums.add((double) round(distanceSum / (double)AVG_SIZE));
                distanceSum = 0;
            }
            x = thisx;
            y = thisy;
        }
        
        // just drop in the last value if there is one
        if (distanceSum != 0 && sumCount % AVG_SIZE != 0) {
            sums.add((double) round(distanceSum / (double)AVG_SIZE));
        }

        sumCount = sums.size();

        MessageDigest md5 = null;
        try {
            md5 = MessageDigest.getInstance("md5");
        } catch (NoSuchAlgorithmException e) {
            return null;
        }

        for (int i = 0; i < sumCount; i++) {
            if (i + 1 < sumCount) {
                md5.update(String.valueOf((int) ((sums.get(i) + sums.get(i + 1)) / 2F)).getBytes());
            }
        }
        
        byte[] data = md5.digest();
        StringBuffer output = new StringBuffer(data.length * 2);
        for (int i = 0; i < data.length; i++) {
            if ((data[i] & 0xFF) < 16) {
                output.append("0");
            }
            output.append(Integer.toHexString((int) data[i] & 0xFF));
        }

        return output.toString();

    }

    private static final long round(double value) {
        return ROUND_TO * (long) (value / (double)ROUND_TO);
    }

    private static final long sumChars(String word) {
        long sum = 0;
        for (int i = 0; i < word.length(); i++) {
            sum += word.charAt(i) - 'a';
        }
        return sum;
    }

}
