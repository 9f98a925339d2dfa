// Writes Export files again with Hadoop's own SequenceFile.Writer, compressed as HBase's Export
// writes them with -Dmapreduce.output.fileoutputformat.compress=true: RECORD (the default) or
// BLOCK, DefaultCodec (zlib). tests/hbase_interop/run.sh then imports them with kura import.
//
//   java kura.interop.HadoopRewrite RECORD|BLOCK OUTDIR FILE...
//
// Each FILE's (ImmutableBytesWritable, Result) records are copied unchanged into OUTDIR under the
// same name, with Hadoop's sync markers, compression and block layout.
package kura.interop;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.io.ImmutableBytesWritable;
import org.apache.hadoop.io.SequenceFile;
import org.apache.hadoop.io.compress.DefaultCodec;

public class HadoopRewrite {
  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      System.err.println("usage: HadoopRewrite RECORD|BLOCK OUTDIR FILE...");
      System.exit(2);
    }
    SequenceFile.CompressionType type = SequenceFile.CompressionType.valueOf(args[0]);
    Configuration conf = new Configuration(false);
    conf.set("io.serializations", "org.apache.hadoop.io.serializer.WritableSerialization,"
        + ResultSerialization.class.getName());
    conf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem");
    DefaultCodec codec = new DefaultCodec();
    codec.setConf(conf);
    for (int i = 2; i < args.length; i++) {
      Path in = new Path(args[i]);
      Path out = new Path(args[1], in.getName());
      long n = 0;
      try (SequenceFile.Reader r = new SequenceFile.Reader(conf, SequenceFile.Reader.file(in));
          SequenceFile.Writer w = SequenceFile.createWriter(conf,
              SequenceFile.Writer.file(out),
              SequenceFile.Writer.keyClass(ImmutableBytesWritable.class),
              SequenceFile.Writer.valueClass(Result.class),
              SequenceFile.Writer.compression(type, codec))) {
        Object key = null;
        Object value = null;
        while ((key = r.next(key)) != null) {
          value = r.getCurrentValue(value);
          w.append(key, value);
          n++;
        }
      }
      System.out.println("wrote " + out + ": " + n + " records, " + type + " DefaultCodec");
    }
  }
}
