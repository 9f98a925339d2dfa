// Reads a Result value as HBase's ResultSerialization does (Result.parseDelimitedFrom): a
// protobuf varint length, then that many bytes. Hadoop's reader then checks that the value
// was consumed exactly, so a wrong length prefix fails the read. The Result keeps the whole
// value, length included: the Python side parses it as a delimited message itself. The
// serializer writes those bytes back unchanged (HadoopRewrite).
package kura.interop;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.io.serializer.Deserializer;
import org.apache.hadoop.io.serializer.Serialization;
import org.apache.hadoop.io.serializer.Serializer;

public class ResultSerialization implements Serialization<Result> {
  @Override
  public boolean accept(Class<?> c) {
    return Result.class.isAssignableFrom(c);
  }

  @Override
  public Deserializer<Result> getDeserializer(Class<Result> c) {
    return new Deserializer<Result>() {
      private InputStream in;

      @Override
      public void open(InputStream in) {
        this.in = in;
      }

      @Override
      public Result deserialize(Result r) throws IOException {
        java.io.ByteArrayOutputStream raw = new java.io.ByteArrayOutputStream();
        long len = 0;
        for (int shift = 0; ; shift += 7) {
          int b = in.read();
          if (b < 0) {
            throw new IOException("the value ends inside its varint length");
          }
          raw.write(b);
          len |= (long) (b & 0x7f) << shift;
          if ((b & 0x80) == 0) {
            break;
          }
          if (shift > 63) {
            throw new IOException("a varint longer than 10 bytes");
          }
        }
        byte[] m = in.readNBytes((int) len);
        if (m.length != len) {
          throw new IOException("the value ends inside its message");
        }
        raw.write(m);
        Result out = r == null ? new Result() : r;
        out.setMessage(raw.toByteArray());
        return out;
      }

      @Override
      public void close() {}
    };
  }

  /** Writes a Result read by the deserializer back unchanged (its varint length included). */
  @Override
  public Serializer<Result> getSerializer(Class<Result> c) {
    return new Serializer<Result>() {
      private OutputStream out;

      @Override
      public void open(OutputStream out) {
        this.out = out;
      }

      @Override
      public void serialize(Result r) throws IOException {
        out.write(r.message());
      }

      @Override
      public void close() {}
    };
  }
}
