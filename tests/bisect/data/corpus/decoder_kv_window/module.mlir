module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<11x16xf32>, %arg1: tensor<16xf32>, %arg2: tensor<16xf32>, %arg3: tensor<16x64xf32>, %arg4: tensor<64x16xf32>, %arg5: tensor<16x16xf32>, %arg6: tensor<16x16xf32>, %arg7: tensor<16x16xf32>, %arg8: tensor<16x16xf32>, %arg9: tensor<i32>, %arg10: tensor<34x16xf32>, %arg11: tensor<34x16xf32>, %arg12: tensor<i32>) -> (tensor<16xf32> {jax.result_info = "result[0]"}, tensor<34x16xf32> {jax.result_info = "result[1]"}, tensor<34x16xf32> {jax.result_info = "result[2]"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.compare LT, %arg9, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<11> : tensor<i32>
    %1 = stablehlo.add %arg9, %c_0 : tensor<i32>
    %2 = stablehlo.select %0, %1, %arg9 : tensor<i1>, tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %3 = stablehlo.compare LT, %c_1, %c_2, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %c_4 = stablehlo.constant dense<16> : tensor<i32>
    %4 = stablehlo.add %c_3, %c_4 : tensor<i32>
    %c_5 = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.select %3, %4, %c_5 : tensor<i1>, tensor<i32>
    %6 = stablehlo.dynamic_slice %arg0, %2, %5, sizes = [1, 16] : (tensor<11x16xf32>, tensor<i32>, tensor<i32>) -> tensor<1x16xf32>
    %7 = stablehlo.reshape %6 : (tensor<1x16xf32>) -> tensor<16xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %8 = stablehlo.reduce(%7 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<16xf32>, tensor<f32>) -> tensor<f32>
    %9 = stablehlo.broadcast_in_dim %8, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %cst_6 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %10 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %11 = stablehlo.divide %9, %10 : tensor<1xf32>
    %12 = stablehlo.broadcast_in_dim %11, dims = [0] : (tensor<1xf32>) -> tensor<16xf32>
    %13 = stablehlo.subtract %7, %12 : tensor<16xf32>
    %14 = stablehlo.multiply %13, %13 : tensor<16xf32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %15 = stablehlo.reduce(%14 init: %cst_7) applies stablehlo.add across dimensions = [0] : (tensor<16xf32>, tensor<f32>) -> tensor<f32>
    %16 = stablehlo.broadcast_in_dim %15, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %cst_8 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %17 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %18 = stablehlo.divide %16, %17 : tensor<1xf32>
    %19 = stablehlo.broadcast_in_dim %11, dims = [0] : (tensor<1xf32>) -> tensor<16xf32>
    %20 = stablehlo.subtract %7, %19 : tensor<16xf32>
    %cst_9 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %21 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %22 = stablehlo.add %18, %21 : tensor<1xf32>
    %23 = stablehlo.rsqrt %22 : tensor<1xf32>
    %24 = stablehlo.broadcast_in_dim %23, dims = [0] : (tensor<1xf32>) -> tensor<16xf32>
    %25 = stablehlo.multiply %20, %24 : tensor<16xf32>
    %26 = stablehlo.multiply %25, %arg1 : tensor<16xf32>
    %27 = stablehlo.dot_general %26, %arg7, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16xf32>, tensor<16x16xf32>) -> tensor<16xf32>
    %28 = stablehlo.dot_general %26, %arg5, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16xf32>, tensor<16x16xf32>) -> tensor<16xf32>
    %29 = stablehlo.dot_general %26, %arg8, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16xf32>, tensor<16x16xf32>) -> tensor<16xf32>
    %30 = stablehlo.broadcast_in_dim %28, dims = [1] : (tensor<16xf32>) -> tensor<1x16xf32>
    %c_10 = stablehlo.constant dense<0> : tensor<i32>
    %31 = stablehlo.compare LT, %arg12, %c_10, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_11 = stablehlo.constant dense<34> : tensor<i32>
    %32 = stablehlo.add %arg12, %c_11 : tensor<i32>
    %33 = stablehlo.select %31, %32, %arg12 : tensor<i1>, tensor<i32>
    %c_12 = stablehlo.constant dense<0> : tensor<i32>
    %34 = stablehlo.dynamic_update_slice %arg10, %30, %33, %c_12 : (tensor<34x16xf32>, tensor<1x16xf32>, tensor<i32>, tensor<i32>) -> tensor<34x16xf32>
    %35 = stablehlo.broadcast_in_dim %29, dims = [1] : (tensor<16xf32>) -> tensor<1x16xf32>
    %c_13 = stablehlo.constant dense<0> : tensor<i32>
    %36 = stablehlo.compare LT, %arg12, %c_13, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_14 = stablehlo.constant dense<34> : tensor<i32>
    %37 = stablehlo.add %arg12, %c_14 : tensor<i32>
    %38 = stablehlo.select %36, %37, %arg12 : tensor<i1>, tensor<i32>
    %c_15 = stablehlo.constant dense<0> : tensor<i32>
    %39 = stablehlo.dynamic_update_slice %arg11, %35, %38, %c_15 : (tensor<34x16xf32>, tensor<1x16xf32>, tensor<i32>, tensor<i32>) -> tensor<34x16xf32>
    %40 = call @window(%34, %arg12) : (tensor<34x16xf32>, tensor<i32>) -> tensor<30x16xf32>
    %c_16 = stablehlo.constant dense<0> : tensor<i32>
    %41 = stablehlo.compare LT, %arg12, %c_16, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_17 = stablehlo.constant dense<30> : tensor<i32>
    %42 = stablehlo.add %arg12, %c_17 : tensor<i32>
    %43 = stablehlo.select %41, %42, %arg12 : tensor<i1>, tensor<i32>
    %c_18 = stablehlo.constant dense<0> : tensor<i32>
    %44 = stablehlo.dynamic_slice %40, %43, %c_18, sizes = [4, 16] : (tensor<30x16xf32>, tensor<i32>, tensor<i32>) -> tensor<4x16xf32>
    %45 = call @window(%39, %arg12) : (tensor<34x16xf32>, tensor<i32>) -> tensor<30x16xf32>
    %c_19 = stablehlo.constant dense<0> : tensor<i32>
    %46 = stablehlo.compare LT, %arg12, %c_19, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_20 = stablehlo.constant dense<30> : tensor<i32>
    %47 = stablehlo.add %arg12, %c_20 : tensor<i32>
    %48 = stablehlo.select %46, %47, %arg12 : tensor<i1>, tensor<i32>
    %c_21 = stablehlo.constant dense<0> : tensor<i32>
    %49 = stablehlo.dynamic_slice %45, %48, %c_21, sizes = [4, 16] : (tensor<30x16xf32>, tensor<i32>, tensor<i32>) -> tensor<4x16xf32>
    %50 = stablehlo.broadcast_in_dim %27, dims = [1] : (tensor<16xf32>) -> tensor<1x16xf32>
    %51 = stablehlo.reshape %50 : (tensor<1x16xf32>) -> tensor<1x2x8xf32>
    %52 = stablehlo.reshape %44 : (tensor<4x16xf32>) -> tensor<4x2x8xf32>
    %53 = stablehlo.reshape %49 : (tensor<4x16xf32>) -> tensor<4x2x8xf32>
    %54 = stablehlo.dot_general %51, %52, batching_dims = [1] x [1], contracting_dims = [2] x [2], precision = [DEFAULT, DEFAULT] : (tensor<1x2x8xf32>, tensor<4x2x8xf32>) -> tensor<2x1x4xf32>
    %cst_22 = stablehlo.constant dense<2.82842708> : tensor<f32>
    %55 = stablehlo.broadcast_in_dim %cst_22, dims = [] : (tensor<f32>) -> tensor<2x1x4xf32>
    %56 = stablehlo.divide %54, %55 : tensor<2x1x4xf32>
    %cst_23 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %57 = stablehlo.reduce(%56 init: %cst_23) applies stablehlo.maximum across dimensions = [2] : (tensor<2x1x4xf32>, tensor<f32>) -> tensor<2x1xf32>
    %cst_24 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %58 = stablehlo.broadcast_in_dim %cst_24, dims = [] : (tensor<f32>) -> tensor<2x1xf32>
    %59 = stablehlo.maximum %58, %57 : tensor<2x1xf32>
    %60 = stablehlo.broadcast_in_dim %59, dims = [0, 1] : (tensor<2x1xf32>) -> tensor<2x1x1xf32>
    %61 = stablehlo.broadcast_in_dim %60, dims = [0, 1, 2] : (tensor<2x1x1xf32>) -> tensor<2x1x4xf32>
    %62 = stablehlo.subtract %56, %61 : tensor<2x1x4xf32>
    %63 = stablehlo.exponential %62 : tensor<2x1x4xf32>
    %cst_25 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %64 = stablehlo.reduce(%63 init: %cst_25) applies stablehlo.add across dimensions = [2] : (tensor<2x1x4xf32>, tensor<f32>) -> tensor<2x1xf32>
    %65 = stablehlo.broadcast_in_dim %64, dims = [0, 1] : (tensor<2x1xf32>) -> tensor<2x1x1xf32>
    %66 = stablehlo.broadcast_in_dim %65, dims = [0, 1, 2] : (tensor<2x1x1xf32>) -> tensor<2x1x4xf32>
    %67 = stablehlo.divide %63, %66 : tensor<2x1x4xf32>
    %68 = stablehlo.dot_general %53, %67, batching_dims = [1] x [0], contracting_dims = [0] x [2], precision = [DEFAULT, DEFAULT] : (tensor<4x2x8xf32>, tensor<2x1x4xf32>) -> tensor<2x8x1xf32>
    %69 = stablehlo.transpose %68, dims = [2, 0, 1] : (tensor<2x8x1xf32>) -> tensor<1x2x8xf32>
    %70 = stablehlo.reshape %69 : (tensor<1x2x8xf32>) -> tensor<16xf32>
    %71 = stablehlo.dot_general %70, %arg6, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16xf32>, tensor<16x16xf32>) -> tensor<16xf32>
    %72 = stablehlo.add %7, %71 : tensor<16xf32>
    %cst_26 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %73 = stablehlo.reduce(%72 init: %cst_26) applies stablehlo.add across dimensions = [0] : (tensor<16xf32>, tensor<f32>) -> tensor<f32>
    %74 = stablehlo.broadcast_in_dim %73, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %cst_27 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %75 = stablehlo.broadcast_in_dim %cst_27, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %76 = stablehlo.divide %74, %75 : tensor<1xf32>
    %77 = stablehlo.broadcast_in_dim %76, dims = [0] : (tensor<1xf32>) -> tensor<16xf32>
    %78 = stablehlo.subtract %72, %77 : tensor<16xf32>
    %79 = stablehlo.multiply %78, %78 : tensor<16xf32>
    %cst_28 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %80 = stablehlo.reduce(%79 init: %cst_28) applies stablehlo.add across dimensions = [0] : (tensor<16xf32>, tensor<f32>) -> tensor<f32>
    %81 = stablehlo.broadcast_in_dim %80, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %cst_29 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %82 = stablehlo.broadcast_in_dim %cst_29, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %83 = stablehlo.divide %81, %82 : tensor<1xf32>
    %84 = stablehlo.broadcast_in_dim %76, dims = [0] : (tensor<1xf32>) -> tensor<16xf32>
    %85 = stablehlo.subtract %72, %84 : tensor<16xf32>
    %cst_30 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %86 = stablehlo.broadcast_in_dim %cst_30, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %87 = stablehlo.add %83, %86 : tensor<1xf32>
    %88 = stablehlo.rsqrt %87 : tensor<1xf32>
    %89 = stablehlo.broadcast_in_dim %88, dims = [0] : (tensor<1xf32>) -> tensor<16xf32>
    %90 = stablehlo.multiply %85, %89 : tensor<16xf32>
    %91 = stablehlo.multiply %90, %arg2 : tensor<16xf32>
    %92 = stablehlo.dot_general %91, %arg3, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16xf32>, tensor<16x64xf32>) -> tensor<64xf32>
    %93 = stablehlo.multiply %92, %92 : tensor<64xf32>
    %94 = stablehlo.multiply %93, %92 : tensor<64xf32>
    %cst_31 = stablehlo.constant dense<4.471500e-02> : tensor<f32>
    %95 = stablehlo.broadcast_in_dim %cst_31, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %96 = stablehlo.multiply %95, %94 : tensor<64xf32>
    %97 = stablehlo.add %92, %96 : tensor<64xf32>
    %cst_32 = stablehlo.constant dense<0.797884583> : tensor<f32>
    %98 = stablehlo.broadcast_in_dim %cst_32, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %99 = stablehlo.multiply %98, %97 : tensor<64xf32>
    %100 = stablehlo.tanh %99 : tensor<64xf32>
    %cst_33 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %101 = stablehlo.broadcast_in_dim %cst_33, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %102 = stablehlo.add %101, %100 : tensor<64xf32>
    %cst_34 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %103 = stablehlo.broadcast_in_dim %cst_34, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %104 = stablehlo.multiply %103, %102 : tensor<64xf32>
    %105 = stablehlo.multiply %92, %104 : tensor<64xf32>
    %106 = stablehlo.dot_general %105, %arg4, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<64xf32>, tensor<64x16xf32>) -> tensor<16xf32>
    %107 = stablehlo.add %72, %106 : tensor<16xf32>
    return %107, %34, %39 : tensor<16xf32>, tensor<34x16xf32>, tensor<34x16xf32>
  }
  func.func private @window(%arg0: tensor<34x16xf32>, %arg1: tensor<i32>) -> tensor<30x16xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.compare LT, %arg1, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<34> : tensor<i32>
    %1 = stablehlo.add %arg1, %c_0 : tensor<i32>
    %2 = stablehlo.select %0, %1, %arg1 : tensor<i1>, tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %3 = stablehlo.dynamic_slice %arg0, %2, %c_1, sizes = [30, 16] : (tensor<34x16xf32>, tensor<i32>, tensor<i32>) -> tensor<30x16xf32>
    return %3 : tensor<30x16xf32>
  }
}
