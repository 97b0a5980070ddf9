module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<31x7x2x5xf16>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<2x4x1x1xf16>, %arg4: tensor<2x4xi1>, %arg5: tensor<2x2xi1>) -> (tensor<15x1x1x5xf16> {jax.result_info = "result[0]"}, tensor<2x4xi1> {jax.result_info = "result[1]"}, tensor<i1> {jax.result_info = "result[2]"}, tensor<2x2xi1> {jax.result_info = "result[3]"}) {
    %0 = stablehlo.slice %arg0 [0:4:2, 0:4, 0:1:2, 2:3] : (tensor<31x7x2x5xf16>) -> tensor<2x4x1x1xf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.compare LT, %arg1, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<31> : tensor<i32>
    %2 = stablehlo.add %arg1, %c_0 : tensor<i32>
    %3 = stablehlo.select %1, %2, %arg1 : tensor<i1>, tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %4 = stablehlo.compare LT, %arg1, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_2 = stablehlo.constant dense<7> : tensor<i32>
    %5 = stablehlo.add %arg1, %c_2 : tensor<i32>
    %6 = stablehlo.select %4, %5, %arg1 : tensor<i1>, tensor<i32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %7 = stablehlo.compare LT, %arg2, %c_3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_4 = stablehlo.constant dense<2> : tensor<i32>
    %8 = stablehlo.add %arg2, %c_4 : tensor<i32>
    %9 = stablehlo.select %7, %8, %arg2 : tensor<i1>, tensor<i32>
    %c_5 = stablehlo.constant dense<0> : tensor<i32>
    %10 = stablehlo.compare LT, %arg2, %c_5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_6 = stablehlo.constant dense<5> : tensor<i32>
    %11 = stablehlo.add %arg2, %c_6 : tensor<i32>
    %12 = stablehlo.select %10, %11, %arg2 : tensor<i1>, tensor<i32>
    %13 = stablehlo.dynamic_slice %arg0, %3, %6, %9, %12, sizes = [23, 6, 1, 5] : (tensor<31x7x2x5xf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<23x6x1x5xf16>
    %14 = stablehlo.popcnt %arg2 : tensor<i32>
    %15 = stablehlo.compare GT, %arg2, %14, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %16 = stablehlo.multiply %arg2, %14 : tensor<i32>
    %c_7 = stablehlo.constant dense<0> : tensor<i32>
    %17 = stablehlo.compare LT, %arg2, %c_7, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_8 = stablehlo.constant dense<23> : tensor<i32>
    %18 = stablehlo.add %arg2, %c_8 : tensor<i32>
    %19 = stablehlo.select %17, %18, %arg2 : tensor<i1>, tensor<i32>
    %c_9 = stablehlo.constant dense<0> : tensor<i32>
    %20 = stablehlo.compare LT, %16, %c_9, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_10 = stablehlo.constant dense<6> : tensor<i32>
    %21 = stablehlo.add %16, %c_10 : tensor<i32>
    %22 = stablehlo.select %20, %21, %16 : tensor<i1>, tensor<i32>
    %c_11 = stablehlo.constant dense<0> : tensor<i32>
    %23 = stablehlo.compare LT, %16, %c_11, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_12 = stablehlo.constant dense<1> : tensor<i32>
    %24 = stablehlo.add %16, %c_12 : tensor<i32>
    %25 = stablehlo.select %23, %24, %16 : tensor<i1>, tensor<i32>
    %c_13 = stablehlo.constant dense<0> : tensor<i32>
    %26 = stablehlo.compare LT, %arg1, %c_13, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_14 = stablehlo.constant dense<5> : tensor<i32>
    %27 = stablehlo.add %arg1, %c_14 : tensor<i32>
    %28 = stablehlo.select %26, %27, %arg1 : tensor<i1>, tensor<i32>
    %29 = stablehlo.dynamic_slice %13, %19, %22, %25, %28, sizes = [15, 1, 1, 5] : (tensor<23x6x1x5xf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<15x1x1x5xf16>
    %30 = stablehlo.negate %29 : tensor<15x1x1x5xf16>
    %31 = stablehlo.exponential %30 : tensor<15x1x1x5xf16>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f16>
    %32 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f16>) -> tensor<15x1x1x5xf16>
    %33 = stablehlo.add %32, %31 : tensor<15x1x1x5xf16>
    %cst_15 = stablehlo.constant dense<1.000000e+00> : tensor<f16>
    %34 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f16>) -> tensor<15x1x1x5xf16>
    %35 = stablehlo.divide %34, %33 : tensor<15x1x1x5xf16>
    %36 = stablehlo.minimum %35, %35 : tensor<15x1x1x5xf16>
    %37 = stablehlo.compare LT, %0, %arg3, FLOAT : (tensor<2x4x1x1xf16>, tensor<2x4x1x1xf16>) -> tensor<2x4x1x1xi1>
    %38 = stablehlo.reshape %37 : (tensor<2x4x1x1xi1>) -> tensor<2x4xi1>
    %39 = stablehlo.and %38, %arg4 : tensor<2x4xi1>
    %c_16 = stablehlo.constant dense<true> : tensor<i1>
    %40 = stablehlo.reduce(%arg4 init: %c_16) applies stablehlo.and across dimensions = [0, 1] : (tensor<2x4xi1>, tensor<i1>) -> tensor<i1>
    return %36, %39, %40, %arg5 : tensor<15x1x1x5xf16>, tensor<2x4xi1>, tensor<i1>, tensor<2x2xi1>
  }
}
