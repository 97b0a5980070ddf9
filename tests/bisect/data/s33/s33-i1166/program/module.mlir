module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4099x3xf16>) -> (tensor<4099x3xf16> {jax.result_info = "result[0]"}, tensor<f16> {jax.result_info = "result[1]"}, tensor<4099x3xf16> {jax.result_info = "result[2]"}, tensor<4099xi32> {jax.result_info = "result[3]"}) {
    %0 = stablehlo.sign %arg0 : tensor<4099x3xf16>
    %cst = stablehlo.constant dense<-8.000000e+00> : tensor<f16>
    %cst_0 = stablehlo.constant dense<8.000000e+00> : tensor<f16>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f16>) -> tensor<4099x3xf16>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f16>) -> tensor<4099x3xf16>
    %3 = stablehlo.clamp %1, %arg0, %2 : tensor<4099x3xf16>
    %4 = stablehlo.sine %3 : tensor<4099x3xf16>
    %cst_1 = stablehlo.constant dense<0xFC00> : tensor<f16>
    %5 = stablehlo.reduce(%4 init: %cst_1) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<4099x3xf16>, tensor<f16>) -> tensor<f16>
    %cst_2 = stablehlo.constant dense<-8.000000e+00> : tensor<f16>
    %cst_3 = stablehlo.constant dense<8.000000e+00> : tensor<f16>
    %6 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f16>) -> tensor<4099x3xf16>
    %7 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f16>) -> tensor<4099x3xf16>
    %8 = stablehlo.clamp %6, %arg0, %7 : tensor<4099x3xf16>
    %9 = stablehlo.cosine %8 : tensor<4099x3xf16>
    %10 = stablehlo.sign %9 : tensor<4099x3xf16>
    %11 = call @argmax(%arg0) : (tensor<4099x3xf16>) -> tensor<4099xi32>
    return %0, %5, %10, %11 : tensor<4099x3xf16>, tensor<f16>, tensor<4099x3xf16>, tensor<4099xi32>
  }
  func.func private @argmax(%arg0: tensor<4099x3xf16>) -> tensor<4099xi32> {
    %0 = stablehlo.iota dim = 1 : tensor<4099x3xi32>
    %cst = stablehlo.constant dense<0xFC00> : tensor<f16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.reduce(%arg0 init: %cst), (%0 init: %c) across dimensions = [1] : (tensor<4099x3xf16>, tensor<4099x3xi32>, tensor<f16>, tensor<i32>) -> (tensor<4099xf16>, tensor<4099xi32>)
     reducer(%arg1: tensor<f16>, %arg3: tensor<f16>) (%arg2: tensor<i32>, %arg4: tensor<i32>)  {
      %2 = stablehlo.compare GT, %arg1, %arg3, FLOAT : (tensor<f16>, tensor<f16>) -> tensor<i1>
      %3 = stablehlo.compare NE, %arg1, %arg1, FLOAT : (tensor<f16>, tensor<f16>) -> tensor<i1>
      %4 = stablehlo.or %2, %3 : tensor<i1>
      %5 = stablehlo.compare EQ, %arg1, %arg3, FLOAT : (tensor<f16>, tensor<f16>) -> tensor<i1>
      %6 = stablehlo.compare LT, %arg2, %arg4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %7 = stablehlo.and %5, %6 : tensor<i1>
      %8 = stablehlo.or %4, %7 : tensor<i1>
      %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<f16>
      %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i32>
      stablehlo.return %9, %10 : tensor<f16>, tensor<i32>
    }
    return %1#1 : tensor<4099xi32>
  }
}
