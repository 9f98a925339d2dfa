// Reads files with Hadoop's own SequenceFile.Reader and MapFile.Reader and prints every record
// as hex, one per line, for tests/hbase_interop/check.py to compare with what Kura holds.
//
//   java kura.interop.HadoopDump seq FILE...     any SequenceFile (Export part-m-*, partitions)
//   java kura.interop.HadoopDump mapfile DIR...  a MapFile (HashTable's hashes/part-r-*)
//
// Output: "file PATH key=CLASS value=CLASS compression=NONE|RECORD|BLOCK codec=CLASS|-", then
// "rec KEYHEX VALUEHEX" per record (keys and values as HBase sees them: the row bytes of an
// ImmutableBytesWritable, the delimited message of a Result, the digest of an MD5 value),
// and for a MapFile "index-get N" once MapFile.Reader.get() found every key through the index.
package kura.interop;

import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.io.ImmutableBytesWritable;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.MapFile;
import org.apache.hadoop.io.NullWritable;
import org.apache.hadoop.io.SequenceFile;

public class HadoopDump {
  private static String hex(byte[] b) {
    StringBuilder s = new StringBuilder(b.length * 2);
    for (byte x : b) {
      s.append(String.format("%02x", x & 0xff));
    }
    return s.length() == 0 ? "-" : s.toString();
  }

  private static String show(Object o) {
    if (o instanceof ImmutableBytesWritable) {
      return hex(((ImmutableBytesWritable) o).get());
    }
    if (o instanceof Result) {
      return hex(((Result) o).message());
    }
    if (o instanceof LongWritable) {
      return Long.toString(((LongWritable) o).get());
    }
    if (o instanceof NullWritable) {
      return "-";
    }
    throw new IllegalStateException("unexpected class " + o.getClass());
  }

  private static String header(SequenceFile.Reader r, String path) {
    String comp = !r.isCompressed() ? "NONE" : r.isBlockCompressed() ? "BLOCK" : "RECORD";
    String codec = r.getCompressionCodec() == null ? "-" : r.getCompressionCodec().getClass().getName();
    return "file " + path + " key=" + r.getKeyClassName() + " value=" + r.getValueClassName()
        + " compression=" + comp + " codec=" + codec;
  }

  private static void seq(Configuration conf, String path) throws Exception {
    try (SequenceFile.Reader r = new SequenceFile.Reader(conf, SequenceFile.Reader.file(new Path(path)))) {
      System.out.println(header(r, path));
      Object key = null, value = null;
      while ((key = r.next(key)) != null) {
        value = r.getCurrentValue(value);
        System.out.println("rec " + show(key) + " " + show(value));
      }
    }
  }

  private static void mapfile(Configuration conf, String dir) throws Exception {
    List<byte[]> keys = new ArrayList<>();
    List<byte[]> values = new ArrayList<>();
    try (MapFile.Reader r = new MapFile.Reader(new Path(dir), conf)) {
      System.out.println("file " + dir + " key=" + r.getKeyClass().getName() + " value=" + r.getValueClass().getName() + " compression=MAPFILE codec=-");
      ImmutableBytesWritable k = new ImmutableBytesWritable();
      ImmutableBytesWritable v = new ImmutableBytesWritable();
      while (r.next(k, v)) {
        System.out.println("rec " + show(k) + " " + show(v));
        keys.add(k.get().clone());
        values.add(v.get().clone());
      }
      // Every key again through the index (MapFile.Reader.get seeks by the index offsets).
      for (int i = keys.size() - 1; i >= 0; i--) {
        ImmutableBytesWritable want = new ImmutableBytesWritable();
        want.set(keys.get(i));
        ImmutableBytesWritable got = new ImmutableBytesWritable();
        if (r.get(want, got) == null) {
          throw new IllegalStateException(dir + ": MapFile.get did not find key " + hex(keys.get(i)));
        }
        if (!java.util.Arrays.equals(got.get(), values.get(i)) && !hasDuplicate(keys, i)) {
          throw new IllegalStateException(dir + ": MapFile.get returned another value for " + hex(keys.get(i)));
        }
      }
      System.out.println("index-get " + keys.size());
    }
  }

  private static boolean hasDuplicate(List<byte[]> keys, int i) {
    return (i > 0 && java.util.Arrays.equals(keys.get(i - 1), keys.get(i)))
        || (i + 1 < keys.size() && java.util.Arrays.equals(keys.get(i + 1), keys.get(i)));
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 2) {
      System.err.println("usage: HadoopDump seq FILE... | HadoopDump mapfile DIR...");
      System.exit(2);
    }
    Configuration conf = new Configuration(false);
    conf.set("io.serializations", "org.apache.hadoop.io.serializer.WritableSerialization,"
        + ResultSerialization.class.getName());
    conf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem");
    for (int i = 1; i < args.length; i++) {
      if (args[0].equals("seq")) {
        seq(conf, args[i]);
      } else if (args[0].equals("mapfile")) {
        mapfile(conf, args[i]);
      } else {
        System.err.println("unknown mode " + args[0]);
        System.exit(2);
      }
    }
  }
}
